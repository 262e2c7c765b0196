"""mmdkit.physics: MMD rigid bodies, joints and PMX 2.1 soft bodies on the real Bullet.

In: a ``Model`` once, then per frame bone_world (B, 4, 4) float32 model space and dt seconds.
Out: bone_world with the rows of physics-driven bones overwritten. ``physics_for(model)`` is the
one way to get a world (None when off or nothing to simulate, ``UnavailableError`` without the
C++ extension). Submodules: ``setup`` (numpy: body/joint frames; imports without the extension),
``soft`` (soft bodies), ``world`` (``MMDPhysics``), ``springs`` (VRM spring bones: ``SpringWorld``,
numba, for a model with ``source_extras['vrm_springs']`` and no rigid bodies).
"""

from __future__ import annotations

from mmdkit.errors import UnavailableError
from mmdkit.physics.setup import (BLOWUP_SIZES, DEFAULT_FIXED_STEP, DEFAULT_MAX_SUBSTEPS, DEFAULT_WARMUP_STEPS,
                                  GRAVITY, euler_to_matrix)

__all__ = ["MMDPhysics", "physics_for", "simulated", "has_springs", "euler_to_matrix", "DEFAULT_FIXED_STEP", "DEFAULT_MAX_SUBSTEPS",
           "GRAVITY", "DEFAULT_WARMUP_STEPS", "BLOWUP_SIZES", "UNAVAILABLE_MESSAGE"]

UNAVAILABLE_MESSAGE = "physics needs the Bullet extension: run scripts/setup.sh, or use --no-physics"


def has_springs(model) -> bool:
    """True when ``model`` carries VRM spring bones (``source_extras['vrm_springs']``)."""
    sp = (getattr(model, "source_extras", None) or {}).get("vrm_springs")
    return sp is not None and sp.num_joints > 0


def simulated(model) -> bool:
    """True when ``physics_for`` gives ``model`` a world: rigid or soft bodies, or spring bones."""
    return bool(len(model.rigid_body_name) or len(getattr(model, "soft_bodies", ()) or ()) or has_springs(model))


def physics_for(model, enabled: bool = True, **kw):
    """The physics world for ``model``: an ``MMDPhysics(model, **kw)``, a ``SpringWorld`` for a VRM
    with spring bones and no bodies, or None when ``enabled`` is False or there is nothing to
    simulate. Raises ``UnavailableError`` (one line, what to do) when the Bullet extension is not
    built."""
    if not enabled or not simulated(model):
        return None
    if not (len(model.rigid_body_name) or len(getattr(model, "soft_bodies", ()) or ())):
        from mmdkit.physics.springs import SpringWorld
        return SpringWorld(model)
    try:
        from mmdkit.physics.world import MMDPhysics
    except ImportError as e:
        raise UnavailableError(UNAVAILABLE_MESSAGE) from e
    return MMDPhysics(model, **kw)


def __getattr__(name):
    # MMDPhysics needs the C++ extension: import it on first use, so that ``mmdkit.physics.setup``
    # and friends import without it (a missing extension raises ImportError here).
    if name == "MMDPhysics":
        from mmdkit.physics.world import MMDPhysics
        return MMDPhysics
    raise AttributeError(f"module 'mmdkit.physics' has no attribute {name!r}")
