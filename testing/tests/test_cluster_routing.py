"""The affinity ranking (pure, no Ray) and the ingress's frame cutting."""
from extensions_built_in.inference_cluster.affinity import ReplicaView, bytes_to_load, rank
from extensions_built_in.inference_cluster.frames import FrameCutter, lost_frames
from extensions_built_in.inference_engine.protocol import FrameReader, encode_frame

A = {"te": 1000, "vae": 100, "dit": 5000, "tok": 0}        # model A's components: key -> bytes
B = {"te": 1000, "vae": 100, "dit2": 6000, "tok": 0}       # B shares A's text encoder and VAE


def view(rid, keys=(), queue=0):
    return ReplicaView(rid, frozenset(keys), queue)


def test_bytes_to_load_counts_only_what_is_missing():
    assert bytes_to_load(A, {"te", "vae"}) == 5000 and bytes_to_load(A, set(A)) == 0 and bytes_to_load(A, ()) == 6100


def test_the_replica_holding_the_model_ranks_first():
    assert rank(A, [view("r1", B), view("r2", A), view("r3")]) == [["r2"], ["r1"], ["r3"]]


def test_shared_components_count_a_partial_hit():
    """B's replica holds A's text encoder and VAE: A loads only its transformer there."""
    assert rank(A, [view("empty"), view("b", B)])[0] == ["b"]


def test_queue_breaks_ties_and_equal_replicas_share_a_rank():
    assert rank(A, [view("r1", queue=2), view("r2", queue=0), view("r3", queue=0)]) == [["r2", "r3"], ["r1"]]


def test_imbalance_bound_sends_a_hot_model_elsewhere():
    """The holder's queue exceeds the shortest by more than max_imbalance: it goes last."""
    replicas = [view("hot", A, queue=4), view("idle", queue=0)]
    assert rank(A, replicas, max_imbalance=2) == [["idle"], ["hot"]]
    assert rank(A, replicas, max_imbalance=4) == [["hot"], ["idle"]]
    assert rank(A, [view("hot", A, queue=2), view("idle")], max_imbalance=2)[0] == ["hot"]


def test_unknown_components_rank_by_queue_alone():
    assert rank(None, [view("r1", A, queue=1), view("r2", queue=0)]) == [["r2"], ["r1"]]
    assert rank(A, []) == []


def test_frame_cutter_passes_whole_frames_and_sees_the_end():
    frames = [encode_frame({"type": "progress", "request_id": "x", "step": i}, b"p" * i) for i in range(3)]
    frames.append(encode_frame({"type": "end", "request_id": "x", "status": "ok"}))
    data = b"".join(frames)
    cut, out = FrameCutter(), b""
    for i in range(0, len(data), 7):                         # chunks that split frames anywhere
        piece = cut.feed(data[i:i + 7])
        assert piece == b"" or out + piece == data[:len(out) + len(piece)]
        out += piece
    assert out == data and cut.ended and not cut.buffer


def test_a_lost_replica_leaves_a_valid_stream_ending_in_error():
    first = encode_frame({"type": "start", "request_id": "x"})
    cut = FrameCutter()
    sent = cut.feed(first + first[:5])                       # the replica died mid-frame
    assert not cut.ended
    headers = [h for h, _ in FrameReader().feed(sent + lost_frames("x", "gone"))]
    assert [h["type"] for h in headers] == ["start", "error", "end"] and headers[-1]["status"] == "error"
