from toolkit.extension import Extension


class GenerateExtension(Extension):
    """One-shot generation: load a model, write one file per prompt, exit."""
    uid = "Generate"
    name = "Generate"

    @classmethod
    def get_process(cls):
        from extensions_built_in.generate.Generate import Generate
        return Generate


AI_TOOLKIT_EXTENSIONS = [GenerateExtension]
