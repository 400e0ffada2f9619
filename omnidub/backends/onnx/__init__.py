"""ONNX: export OmniVoice's three graphs, check them against torch, and render through ONNX Runtime without torch.

``export`` and ``parity`` need torch and the ``[onnx]`` extra; ``backend``, ``host`` and ``prompt`` import no torch.
"""
