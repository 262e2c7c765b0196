"""``mmdkit info FILE [--model MODEL] [--json]``: what a model, motion or pose file holds.

In: a path of any format the registry reads (PMX/PMD/VMD/VPD, glTF/GLB, the Assimp formats), and
for a motion or pose optionally the model it is meant for. Out: a readable summary on stdout, or
(``--json``) one JSON object with ``format``, ``version``, ``encoding``, the counts as top-level
keys, ``names`` and ``warnings``; for a model also ``missing_textures`` (stored paths with no file
in the model's folder) and, where it carries clips, ``clip_seconds`` (name → duration); with
``--model``, ``binding`` (tracks bound and every unbound bone and morph name); with ``--humanoid``
(or ``--humanoid-map MAP.json``, a user's {humanoid bone: model bone} table), ``humanoid``: the
model's VRM humanoid map (``mmdkit.retarget``: bone, confidence, source; what is missing).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from mmdkit.errors import FormatError


def describe(obj) -> dict:
    """The ``info --json`` object for a loaded Model, Motion or Pose."""
    from mmdkit.animation.motion import Motion, Pose
    from mmdkit.model.model import Model

    ex = obj.source_extras or {}
    if isinstance(obj, Model):
        fmt = obj.source_format or "built"
        if fmt == "pmx":
            version, enc = f"{ex.get('version', 2.0):.1f}", ex.get("encoding", "utf-16-le")
        elif fmt == "pmd":
            version, enc = f"{ex.get('version', 1.0):.1f}", "cp932"
        else:
            version, enc = "", ""
        d = dict(format=fmt, version=version, encoding=enc, vertices=obj.num_vertices, faces=obj.num_faces,
                 materials=obj.num_materials, bones=obj.num_bones, morphs=obj.num_morphs,
                 rigid_bodies=obj.num_rigid_bodies, joints=obj.num_joints, soft_bodies=obj.num_soft_bodies,
                 ik_chains=len(obj.ik_bone), textures=len(obj.texture_path))
        d["names"] = dict(model=obj.name, model_en=obj.name_en, bones=list(obj.bone_name),
                          morphs=list(obj.morph_name), materials=list(obj.material_name),
                          textures=list(obj.texture_path))
        if "skin_joints" in ex:  # an imported character (mmdkit.importers): skin joints and its clips
            d.update(version="2.0" if fmt == "gltf" else "", skin_joints=ex["skin_joints"],
                     clips=len(ex.get("clips", ())))
            d["names"]["clips"] = list(ex.get("clips", ()))
            if ex.get("clips"):
                d["clip_seconds"] = clip_seconds(obj)
        if "vrm_humanoid" in ex:
            d["vrm"] = vrm_summary(ex)
    elif isinstance(obj, Motion):
        d = dict(format="vmd", version=ex.get("version", "0002"), encoding="cp932", bone_keys=obj.num_bone_keys,
                 morph_keys=obj.num_morph_keys, camera_keys=obj.num_camera_keys, light_keys=obj.num_light_keys,
                 shadow_keys=obj.num_shadow_keys, property_keys=obj.num_property_keys,
                 bone_tracks=len(obj.bone_track_name), morph_tracks=len(obj.morph_track_name),
                 last_frame=obj.last_frame)
        d["names"] = dict(model=obj.model_name, bone_tracks=list(obj.bone_track_name),
                          morph_tracks=list(obj.morph_track_name))
    elif isinstance(obj, Pose):
        d = dict(format="vpd", version="", encoding=ex.get("encoding", "cp932"), bones=obj.num_bones,
                 morphs=len(obj.morph_name))
        d["names"] = dict(model=obj.model_name, bones=list(obj.bone_name), morphs=list(obj.morph_name))
    else:
        raise TypeError(f"cannot describe {type(obj).__name__}")
    d["warnings"] = list(obj.warnings)
    return d


def vrm_summary(ex: dict) -> dict:
    """What a VRM model carries beyond its mesh (``importers.vrm``): version, expression morphs,
    spring joints/chains/colliders, whether first-person and look-at data are kept, MToon materials."""
    sp = ex.get("vrm_springs")
    look = ex.get("vrm_look_at") or {}
    return dict(version=ex["vrm_humanoid"].get("version", ""),
                expressions={k: v["name"] for k, v in (ex.get("vrm_expressions") or {}).items()},
                spring_joints=sp.num_joints if sp is not None else 0,
                spring_chains=len(sp.chain_center) if sp is not None else 0,
                spring_colliders=len(sp.collider_bone) if sp is not None else 0,
                first_person=bool(ex.get("vrm_first_person")), look_at=bool(look),
                look_at_type=str(look.get("type", look.get("lookAtTypeName", ""))),
                mtoon_materials=sum(m is not None for m in ex.get("vrm_mtoon") or ()))


def _vrm_line(v: dict) -> str:
    kept = [k.replace("_", "-") for k in ("first_person", "look_at") if v[k]]
    return (f"  vrm            {v['version']}: {len(v['expressions'])} expressions as morphs, {v['spring_joints']} "
            f"spring joints in {v['spring_chains']} chains, {v['spring_colliders']} colliders, MToon on "
            f"{v['mtoon_materials']} materials; kept: {', '.join(kept) or 'no first-person/look-at data'}"
            + (f" (look-at {v['look_at_type']})" if v["look_at_type"] else ""))


def clip_seconds(model) -> dict[str, float]:
    """{clip name: duration in seconds, to its last whole frame (``Clips.last_frame`` / 30)} of an
    imported model's clips (read without baking them)."""
    from mmdkit.animation.frames import MOTION_FPS
    from mmdkit.importers import clips_of

    clips = clips_of(model)
    return {name: round(clips.last_frame(name) / MOTION_FPS, 3) for name in clips.names}


def binding(model, motion) -> dict:
    """How ``motion`` (a Motion or Pose) binds to ``model``: track counts and every unbound name."""
    from mmdkit.animation.vpd import binding_report

    r = binding_report(model, motion)
    return dict(bone_tracks=r.bone_tracks, bone_tracks_bound=r.bound_bones, morph_tracks=r.morph_tracks,
                morph_tracks_bound=r.bound_morphs, unbound_bones=list(r.unbound_bones),
                unbound_morphs=list(r.unbound_morphs))


def missing_textures(model) -> list[str]:
    """The model's stored texture paths that name no file inside its folder (looked up as the
    renderer does: case-insensitive, never outside the folder)."""
    from mmdkit.model.textures import model_folder, texture_source

    folder = model_folder(model)
    if folder is None:
        return []
    missing = []
    embedded = (model.source_extras or {}).get("embedded_textures")  # images the file itself holds
    for stored in model.texture_path:
        try:
            found = texture_source(stored, folder, embedded)
        except FormatError:  # leaves the model folder: the renderer refuses it too
            found = None
        if found is None:
            missing.append(stored)
    return missing


def _human(path: str, d: dict) -> str:
    n = d["names"]
    title = f"{Path(path).name}: {d['format'].upper()} {d['version']}".rstrip()
    if d["encoding"]:
        title += f" ({d['encoding']})"
    lines = [title]
    if n.get("model") or n.get("model_en"):
        lines.append(f"  name       {n.get('model', '')}" + (f" / {n['model_en']}" if n.get("model_en") else ""))
    skip = {"format", "version", "encoding", "names", "warnings", "missing_textures", "clip_seconds", "binding",
            "humanoid", "humanoid_lines", "vrm"}
    for k, v in d.items():
        if k not in skip:
            lines.append(f"  {k.replace('_', ' '):<14} {v:,}" if isinstance(v, int) else f"  {k:<14} {v}")
    if d.get("vrm"):
        lines.append(_vrm_line(d["vrm"]))
    if d.get("clip_seconds"):
        lines.append("  clips: " + ", ".join(f"{name} ({sec:.2f} s, frames 0:{round(sec * 30)})"
                                             for name, sec in d["clip_seconds"].items()))
    for key in ("bones", "bone_tracks", "morphs", "morph_tracks"):
        if n.get(key):
            shown = ", ".join(n[key][:8]) + (", ..." if len(n[key]) > 8 else "")
            lines.append(f"  {key.replace('_', ' ')}: {shown}")
    b = d.get("binding")
    if b:
        lines.append(f"  binding to {b['model']}: {b['bone_tracks_bound']}/{b['bone_tracks']} bone tracks, "
                     f"{b['morph_tracks_bound']}/{b['morph_tracks']} morph tracks")
        for key in ("unbound_bones", "unbound_morphs"):
            if b[key]:
                lines.append(f"  {key.replace('_', ' ')} ({len(b[key])}): {', '.join(b[key])}")
    if d.get("humanoid_lines"):
        lines += d["humanoid_lines"]
    for w in d["warnings"]:
        lines.append(f"  warning: {w}")
    folder = Path(path).resolve().parent
    for t in d.get("missing_textures", ()):
        lines.append(f"  warning: texture '{t}' not found in {folder}")
    return "\n".join(lines)


def _humanoid(model, override_path, d: dict) -> None:
    """d['humanoid'] (JSON) and d['humanoid_lines'] (text) of ``model``'s humanoid map."""
    from mmdkit.retarget import humanoid_lines, humanoid_map, read_override

    override = read_override(override_path) if override_path else None
    hmap = humanoid_map(model, override, override_path or "")
    d["humanoid"], d["humanoid_lines"] = hmap.to_json(), humanoid_lines(hmap)


def _formats() -> str:
    """The extensions ``mmdkit.load`` reads, by kind, for the help text (from the format registry)."""
    from mmdkit.formats.registry import known_extensions

    kinds = {}
    for ext in known_extensions():
        kinds.setdefault(next(k for k in ("model", "motion", "pose") if ext in known_extensions(k)), []).append(ext)
    return "; ".join(f"{kind}s {' '.join(exts)}" for kind, exts in kinds.items())


@click.command("info", help=f"""Summarise FILE: format, counts, names (clips with their durations), warnings.

FILE is any format mmdkit reads: {_formats()}.

With --model, a motion or pose also says which of its tracks MODEL lacks (every name).""")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--model", "model_path", type=click.Path(dir_okay=False), default=None,
              help="For a motion or pose FILE: the model to bind it to; lists every track the model lacks.")
@click.option("--humanoid", is_flag=True, help="For a model: its humanoid map (VRM 1.0 bone -> model bone, "
              "confidence, source) and the humanoid bones it lacks, required ones first (docs/retarget.md).")
@click.option("--humanoid-map", "humanoid_path", type=click.Path(dir_okay=False), default=None,
              help='With --humanoid: a JSON file {"leftUpperArm": "bone name", ...} overriding entries.')
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a summary.")
def command(file, model_path, humanoid, humanoid_path, as_json):
    from mmdkit.errors import OptionError
    from mmdkit.formats.io import load
    from mmdkit.model.model import Model

    obj = load(file)
    d = describe(obj)
    if isinstance(obj, Model):
        d["missing_textures"] = missing_textures(obj)
        if model_path:
            raise OptionError("--model", f"binds a motion or pose to a model; {file} is a model itself")
        if humanoid or humanoid_path:
            _humanoid(obj, humanoid_path, d)
    elif humanoid or humanoid_path:
        raise OptionError("--humanoid", f"maps a model's bones; {file} is not a model")
    elif model_path:
        model = load(model_path)
        if not isinstance(model, Model):
            raise OptionError("--model", f"{model_path} is a {type(model).__name__}, expected a model")
        d["binding"] = dict(model=model_path, **binding(model, obj))
    if as_json:
        d.pop("humanoid_lines", None)
        click.echo(json.dumps(d, ensure_ascii=False))
    else:
        click.echo(_human(file, d))
