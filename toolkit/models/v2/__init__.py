from toolkit.models.v2.mixin import OstrisModelMixin, aitk, get_load_interceptor, set_load_interceptor
from toolkit.models.v2.policy import LoadPolicy

__all__ = ["OstrisModelMixin", "aitk", "LoadPolicy", "set_load_interceptor", "get_load_interceptor"]
