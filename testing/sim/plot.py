"""The PNG of a grid of result rows: p99 latency, GPU-seconds loading and hit rate per policy and
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
    panels = (("p50_s", "p50 latency (s)", True), ("p99_s", "p99 latency (s)", True),
              ("load_s", "GPU-seconds loading", True), ("hit_rate", "pool hit rate", False))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.8))
    width = 0.8 / len(policies)
    for ax, (key, label, log) in zip(axes, panels):
        for k, p in enumerate(policies):
            xs = [c + (k - (len(policies) - 1) / 2) * width for c in range(len(counts))]
            ax.bar(xs, [by[(p, c)][key] for c in counts], width, label=p)
        ax.set_xticks(range(len(counts)), [str(c) for c in counts])
        ax.set_xlabel("replicas")
        ax.set_title(label)
        if log:
            ax.set_yscale("log")
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
