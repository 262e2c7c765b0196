"""`mmdkit retarget MOTION --source SOURCE_MODEL --target TARGET_MODEL -o OUT`: a dance onto another humanoid.

In: a source motion — a VMD/VPD with the MMD model it was made for (--source), a clip of the
--source model's own file (glTF/VRM/BVH/FBX: --clip, MOTION left out), or a VRM Animation (.vrma,
its own skeleton: no --source) — and a target model (PMX/PMD, VRM, glTF, Assimp formats). Out:
OUT.vmd (the retargeted Motion as keys on the target's own bones, IK keys included: plays with IK
on, stays editable in MMD), or .vrma/.glb/.gltf/.bvh/.npz (the target baked with the retargeted
motion through the export sinks, ``mmdkit.io.run``; .vrma: a VRM Animation of the target's
humanoid, ``export.vrma``, posed without physics: it moves no humanoid bone). A --target .npz/.pkl
is the user's SMPL/SMPL-H/SMPL-X body model: OUT.npz in AMASS's layout (``retarget.amass``).
"""

from __future__ import annotations

import os

import click
import numpy as np

from mmdkit.animation.frames import parse_frames
from mmdkit.animation.motion import Pose
from mmdkit.animation.vpd import motion_from_pose
from mmdkit.cli._common import CLIP_HELP, FRAMES_HELP, PHYSICS_HELP, QUIET_HELP, compile_note, warn
from mmdkit.cli._output import check_output, count, writing
from mmdkit.errors import OptionError
from mmdkit.formats.io import read_bytes, save
from mmdkit.importers import clips_of, read_gltf_model
from mmdkit.model.model import Model
from mmdkit.retarget import humanoid_map, read_override
from mmdkit.retarget.amass import retarget_amass, write_amass
from mmdkit.retarget.motion import retarget
from mmdkit.retarget.smpl import read_body_model
from mmdkit.runtime import loading
from mmdkit.runtime.take import CLI_NAMES, Output, Take
from mmdkit.text import encode_cp932

OUTPUTS = (".vmd", ".vrma", ".glb", ".gltf", ".bvh", ".npz")
VMD_NAME_BYTES = 15
BODY_MODELS = (".npz", ".pkl")


def _file(path: str, option: str) -> str:
    if not os.path.isfile(path):
        raise OptionError(option, f"no file {path!r}")
    return path


def load_source(motion_path, source_path, clip):
    """(source Model, its Motion, label) from the options (see module)."""
    if motion_path and motion_path.lower().endswith(".vrma"):
        model = read_gltf_model(read_bytes(_file(motion_path, "MOTION")), motion_path)
        clips = clips_of(model)
        if not clips or model.num_bones == 0:
            raise OptionError("MOTION", f"{motion_path} has no VRM Animation humanoid clip")
        name, motion = clips.get_clip(clips.resolve(0 if clip is None else clip, "--clip"), "--clip")
        return model, motion, motion_path
    if not source_path:
        raise OptionError("--source", "name the model the motion was made for (or the model whose --clip to use)")
    model = loading.load_as(_file(source_path, "--source"), Model, loading.MODEL_KINDS, "--source", warn=warn)
    names = dict(CLI_NAMES, model="--source")
    motion, label = loading.load_motion_for(model, source_path, motion_path, clip, names=names, warn=warn)
    if isinstance(motion, Pose):
        motion = motion_from_pose(motion)
    return model, motion, label


def _map(model, path):
    return humanoid_map(model, read_override(path), path) if path else None


def _check_body_model(target_path: str, output: str, target_map) -> bool:
    """True when --target is an SMPL-family body model; OptionError for what it cannot take."""
    if not target_path.lower().endswith(BODY_MODELS):
        return False
    if not output.lower().endswith(".npz"):
        raise OptionError("-o", f"{output}: a body model target ({target_path}) writes AMASS .npz")
    if target_map:
        raise OptionError("--target-map", f"a body model ({target_path}) has a fixed humanoid map")
    return True


def _check_vmd_names(motion, target_path: str, output: str) -> None:
    long = [n for n in motion.bone_track_name if len(encode_cp932(n)) > VMD_NAME_BYTES]
    if long:
        raise OptionError("-o", f"{output}: {count(len(long), 'bone name')} of {target_path} do not fit a VMD's "
                                f"{VMD_NAME_BYTES} bytes (e.g. {long[0]!r}); write .glb, .bvh or .npz")


@click.command("retarget")
@click.argument("motion_path", metavar="[MOTION]", required=False)
@click.option("--source", "source_path", metavar="SOURCE_MODEL", help="The model MOTION was made for (or whose "
              "--clip to use); not needed for a .vrma.")
@click.option("--target", "target_path", required=True, metavar="TARGET_MODEL", help="The model to dance it.")
@click.option("-o", "--output", required=True, help="OUT.vmd (keys on the target's bones, leg IK keyed), .vrma "
              "(a VRM Animation of the target's humanoid), .glb/.gltf, .bvh or .npz (the target baked with it).")
@click.option("--clip", default=None, metavar="NAME|INDEX", help=CLIP_HELP)
@click.option("--frames", default=None, help=f"Source motion frames to key: {FRAMES_HELP} Whole frames only. "
              "Default: every frame of the motion.")
@click.option("--contact/--no-contact", default=True, show_default=True,
              help="Keep the feet the source plants planted on the target, never below the floor.")
@click.option("--source-map", type=click.Path(dir_okay=False),
              help="JSON {humanoid bone: source bone name} corrections.")
@click.option("--target-map", type=click.Path(dir_okay=False),
              help="JSON {humanoid bone: target bone name} corrections.")
@click.option("--physics/--no-physics", default=True, show_default=True, help=PHYSICS_HELP + " (.glb/.bvh/.npz)")
@click.option("-q", "--quiet", is_flag=True, help=QUIET_HELP)
def command(motion_path, source_path, target_path, output, clip, frames, contact, source_map, target_map, physics,
            quiet):
    """Retarget MOTION (made for --source) onto --target and write OUT.

    \b
    Examples:
      mmdkit retarget wavefile_v2.vmd --source Gene.pmx --target mokou_A.pmd -o mokou.vmd
      mmdkit retarget wavefile_v2.vmd --source Gene.pmx --target avatar.vrm -o avatar.glb
      mmdkit retarget wavefile_v2.vmd --source Gene.pmx --target avatar.vrm -o dance.vrma
      mmdkit retarget --source mannequiny.glb --clip run --target Gene.pmx -o run.vmd
      mmdkit retarget dance.vrma --target Gene.pmx -o dance.vmd
    """
    ext = os.path.splitext(output)[1].lower()
    if ext not in OUTPUTS:
        raise OptionError("-o", f"{output}: name the output {', '.join(OUTPUTS)}")
    _file(target_path, "--target")
    body = _check_body_model(target_path, output, target_map)
    check_output(output, [p for p in (motion_path, source_path, target_path, source_map, target_map) if p])
    with compile_note(quiet):
        source, motion, label = load_source(motion_path, source_path, clip)
        keys = None
        if frames is not None:
            keys = parse_frames(frames, motion.last_frame)
        if body:
            body_model = read_body_model(target_path)
            try:
                arrays = retarget_amass(source, motion, body_model, frames=keys, contact=contact,
                                        source_map=_map(source, source_map), source_name=source_path or motion_path)
            except OptionError as e:
                raise OptionError("--frames", e.detail) from None
            with writing(output):
                write_amass(output, arrays)
            if not quiet:
                click.echo(f"wrote {output}: {label} retargeted onto {target_path} (AMASS layout), "
                           f"{count(len(arrays['poses']), 'frame')}")
            return
        target = loading.load_as(target_path, Model, loading.MODEL_KINDS, "--target", warn=warn)
        try:
            out = retarget(source, motion, target, frames=keys, source_map=_map(source, source_map),
                           target_map=_map(target, target_map), contact=contact,
                           source_name=motion_path if source_path is None else source_path,
                           target_name=target_path)
        except OptionError as e:
            raise OptionError("--frames", e.detail) from None
        with writing(output):
            if ext == ".vmd":
                _check_vmd_names(out, target_path, output)
                save(out, output)
            else:
                from mmdkit.io import run

                take = Take(target, out, physics=physics and ext != ".vrma", outputs=(Output(output),), names=CLI_NAMES)
                run(take, warn=warn)
    if not quiet:
        click.echo(f"wrote {output}: {label} retargeted onto {target_path}, "
                   f"{count(len(np.unique(out.bone_key_frame)), 'frame')}, {count(len(out.bone_track_name), 'bone')} keyed"
                   + ("" if contact else ", no contact pass"))
