"""torch's CPU random stream in numpy, so a line's gumbel noise is the same under ONNX Runtime as under torch."""

from __future__ import annotations

import numpy as np

# torch.rand on the CPU turns each 32-bit draw of its mt19937 into a float32 from its low 24 bits.
_MANTISSA_BITS = 24
_SCALE = np.float32(2.0**-_MANTISSA_BITS)


class TorchRandom:
    """Draws what ``torch.rand(*shape, generator=torch.Generator().manual_seed(seed))`` draws, bit for bit."""

    def __init__(self, seed: int):
        # torch seeds its mt19937 with the low 32 bits of the seed, the classic init_genrand.
        legacy = np.random.RandomState(seed & 0xFFFF_FFFF).get_state(legacy=False)
        self._bits = np.random.MT19937()
        self._bits.state = {"bit_generator": "MT19937", "state": legacy["state"]}

    def rand(self, *shape: int) -> np.ndarray:
        """Uniform float32 in [0, 1), in torch's order (row-major)."""
        count = int(np.prod(shape, dtype=np.int64))
        raw = self._bits.random_raw(count)
        return ((raw & ((1 << _MANTISSA_BITS) - 1)).astype(np.float32) * _SCALE).reshape(shape)
