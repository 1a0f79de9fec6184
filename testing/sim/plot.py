"""The PNG of a grid of result rows: latency, wait, GPU-seconds loading and hit rate per policy and
replica count. matplotlib is imported here only, when a plot is asked for."""
import os
import tempfile


def plot(rows: list, path: str, title: str = ""):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    policies = list(dict.fromkeys(r["policy"] for r in rows))
    counts = sorted({r["replicas"] for r in rows})
    by = {(r["policy"], r["replicas"]): r for r in rows}
    panels = (("p50_s", "p50 latency (s)"), ("p99_s", "p99 latency (s)"), ("wait_p99_s", "p99 wait: queue + load (s)"),
              ("bytes_loaded", "TB loaded"), ("load_s", "GPU-seconds loading"), ("hit_rate", "pool hit rate"))
    fig, axes = plt.subplots(2, 3, figsize=(12, 6.5))
    axes = axes.ravel()
    width = 0.8 / len(policies)
    for ax, (key, label) in zip(axes, panels):
        scale = 1e12 if key == "bytes_loaded" else 1
        for k, p in enumerate(policies):
            xs = [c + (k - (len(policies) - 1) / 2) * width for c in range(len(counts))]
            ax.bar(xs, [by[(p, c)][key] / scale for c in counts], width, label=p)
        ax.set_xticks(range(len(counts)), [str(c) for c in counts])
        ax.set_xlabel("replicas")
        ax.set_title(label, fontsize=10)
    axes[0].legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(suffix=".png", dir=folder)
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=110)
        os.replace(tmp, path)            # a reader never sees half a PNG
    finally:
        plt.close(fig)
        if os.path.exists(tmp):
            os.unlink(tmp)
