from toolkit.extension import Extension


class InferenceEngineExtension(Extension):
    """A resident generation server: stays up until stopped, serves requests over HTTP."""
    uid = "InferenceEngine"
    name = "Inference Engine"

    @classmethod
    def get_process(cls):
        from extensions_built_in.inference_engine.InferenceEngine import InferenceEngine
        return InferenceEngine


AI_TOOLKIT_EXTENSIONS = [InferenceEngineExtension]
