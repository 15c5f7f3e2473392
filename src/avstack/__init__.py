"""avstack: egocentric clips -> the exact inputs multimodal LLMs are evaluated on."""

__version__ = "0.1.0"
