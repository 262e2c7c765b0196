"""The VRM humanoid of a glTF file: VRM 0.x (``extensions.VRM``) or 1.0 (``extensions.VRMC_vrm``).

In: the file's parsed JSON root (a dict) and its node count. Out: ``vrm_humanoid(root, n_nodes)`` →
(version, {humanoid bone name as the file spells it: node index}) — version '0.x', '1.0' or ''
(no extension). VRM 0.x gives ``humanoid.humanBones`` as a list of {bone, node}; 1.0 as a dict
{bone: {node}}; a VRM Animation's (.vrma) ``VRMC_vrm_animation`` humanoid reads as 1.0's. Entries with a node outside the file or a non-string name are skipped with a
warning (the humanoid is a hint for retargeting, not needed to draw the model). Names are kept as
written (0.x thumbs Proximal/Intermediate/Distal; ``mmdkit.retarget`` maps them to 1.0's).
"""

from __future__ import annotations


def _entries(humanoid, version: str):
    bones = humanoid.get("humanBones") if isinstance(humanoid, dict) else None
    if version == "0.x" and isinstance(bones, list):
        return [(b.get("bone"), b.get("node")) for b in bones if isinstance(b, dict)]
    if version == "1.0" and isinstance(bones, dict):
        return [(k, v.get("node") if isinstance(v, dict) else None) for k, v in bones.items()]
    return []


def vrm_humanoid(root: dict, n_nodes: int, warnings: list | None = None) -> tuple[str, dict[str, int]]:
    """(version, {bone name: node}) of the file's VRM humanoid (see module); ('', {}) without one."""
    ext = root.get("extensions") if isinstance(root, dict) else None
    if not isinstance(ext, dict):
        return "", {}
    if isinstance(ext.get("VRMC_vrm"), dict):
        version, humanoid = "1.0", ext["VRMC_vrm"].get("humanoid")
    elif isinstance(ext.get("VRM"), dict):
        version, humanoid = "0.x", ext["VRM"].get("humanoid")
    elif isinstance(ext.get("VRMC_vrm_animation"), dict):  # a VRM Animation (.vrma): 1.0's layout
        version, humanoid = "1.0", ext["VRMC_vrm_animation"].get("humanoid")
    else:
        return "", {}
    out: dict[str, int] = {}
    bad = 0
    for name, node in _entries(humanoid, version):
        if isinstance(name, str) and isinstance(node, int) and not isinstance(node, bool) and 0 <= node < n_nodes:
            out.setdefault(name, node)
        else:
            bad += 1
    if bad and warnings is not None:
        warnings.append(f"VRM {version} humanoid: {bad} bone entries without a valid node skipped")
    return version, out
