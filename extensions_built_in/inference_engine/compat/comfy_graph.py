"""ComfyUI API-format workflows analysed into engine requests (work in progress: the interface)."""
from dataclasses import dataclass, field


class GraphError(Exception):
    """A workflow refused: /prompt's 400 body is {"error": e.error, "node_errors": e.node_errors}."""

    def __init__(self, error: dict, node_errors: dict | None = None):
        super().__init__(error.get("message", ""))
        self.error = error
        self.node_errors = node_errors or {}


@dataclass
class Job:
    """One engine request: a sampler chain that reaches output nodes."""
    outputs: list = field(default_factory=list)
    model: dict = field(default_factory=dict)
    sample: dict = field(default_factory=dict)
    nodes: list = field(default_factory=list)
    sampler_node: str = ""


def analyse(prompt: dict, files, resolve=None) -> list[Job]:
    raise NotImplementedError
