"""The built-in demo, shipped inside the package so nothing is downloaded.

Out: ``demo_paths()`` → (model path, motion path) of the shipped files: Gene_light (a real MMD
character whose hair, earrings, cloak and hem swing by physics; CC BY 4.0, credits in
``data/gene/README.md``) and the WAVEFILE dance by hino (``data/wavefile/readme_wavefile.utf8.txt``);
``demo_character()`` → (Model, Motion) loaded from them; ``DEMO_FRAMES`` the span the demo
shows. ``demo_model()`` / ``demo_motion()`` → the small box figure built in code
(:mod:`mmdkit.demo.boxes`), fast enough for tests.
"""

from __future__ import annotations

from pathlib import Path

from mmdkit.demo.boxes import demo_model, demo_motion

__all__ = ["DEMO_FRAMES", "demo_paths", "demo_character", "demo_model", "demo_motion"]

_DATA = Path(__file__).resolve().parent / "data"

#: The span of the WAVEFILE dance ``mmdkit render --demo`` plays (motion frames, both ends
#: included): arms swung out and up, a step and a sway, the hair and cloak swinging.
DEMO_FRAMES = (1560, 1649)


def demo_paths() -> tuple[Path, Path]:
    """(model path, motion path): the shipped Gene_light.pmx and wavefile_v2.vmd."""
    return _DATA / "gene" / "Gene_light.pmx", _DATA / "wavefile" / "wavefile_v2.vmd"


def demo_character():
    """(Model, Motion): Gene_light and the WAVEFILE dance, loaded from ``demo_paths()``."""
    from mmdkit.formats.io import load

    model_path, motion_path = demo_paths()
    return load(model_path), load(motion_path)
