from toolkit.extension import Extension


class InferenceClusterExtension(Extension):
    """Engines on several GPUs (or machines) behind one address, on Ray Serve."""
    uid = "InferenceCluster"
    name = "Inference Cluster"

    @classmethod
    def get_process(cls):
        from extensions_built_in.inference_cluster.InferenceCluster import InferenceCluster
        return InferenceCluster


AI_TOOLKIT_EXTENSIONS = [InferenceClusterExtension]
