"""Text of a ``HumanoidMap`` for ``mmdkit info --humanoid``.

In: a ``HumanoidMap``. Out: ``humanoid_lines(map)`` → lines: one per mapped humanoid bone
('  leftUpperArm    左腕   0.90  name:mmd'), the MMD extras, then what is missing (VRM-required
bones first, marked).
"""

from __future__ import annotations

from mmdkit.retarget.bones import HUMANOID_BONES


def humanoid_lines(hmap) -> list[str]:
    """Readable lines of ``hmap`` (see module)."""
    found = [(n, hmap.bone_name[b], c, s) for n, b, c, s in zip(HUMANOID_BONES, hmap.humanoid_bone,
                                                               hmap.humanoid_confidence, hmap.humanoid_source) if b >= 0]
    lines = [f"  humanoid: {len(found)}/{len(HUMANOID_BONES)} bones mapped"]
    lines += [f"    {n:<24} {bone:<24} {c:.2f}  {s}" for n, bone, c, s in found]
    if hmap.extra:
        lines.append("    extra: " + ", ".join(f"{k} {hmap.bone_name[v]}" for k, v in hmap.extra.items()))
    req = hmap.missing(required_only=True)
    if req:
        lines.append(f"  missing required ({len(req)}): {', '.join(req)}")
    rest = [n for n in hmap.missing() if n not in req]
    if rest:
        lines.append(f"  missing ({len(rest)}): {', '.join(rest)}")
    return lines
