"""`mmdkit pose MODEL MOTION --frames A:B -o OUT.npz`: bone world matrices and morph weights.

In: a model and a VMD motion (or VPD pose, or a clip of the model), made into a Take and posed by
the one frame loop into a ``PoseArrays`` sink. Out: an .npz (deflated unless --no-compress)
with frames (F,), bone_names (B,), bone_world (F,B,4,4) float32 (MMD file coordinates,
p = M @ [x,y,z,1]), morph_names (M,), morph_weight (F,M) float32, and with --vertices
vertex_position (F,V,3).
"""

from __future__ import annotations

import click
import numpy as np

from mmdkit.cli._common import (CLIP_HELP, FRAMES_DEFAULT, FRAMES_HELP, PHYSICS_HELP, QUIET_HELP, VERBOSE_HELP,
                                VPD_OPTION_HELP, compile_note, save_npz_atomic, show_progress)
from mmdkit.cli._take import SOURCE_HELP, load, make_take
from mmdkit.cli._memory import check_frames_memory, out_of_memory_blames
from mmdkit.cli._output import check_output, writing
from mmdkit.errors import OptionError
from mmdkit.runtime.driver import run


def _check_memory(spec: str, num_frames: int, model, vertices: bool) -> None:
    """Refuse a --frames whose arrays (held in memory until written) exceed the memory this run may use."""
    per_frame = 8 + model.num_bones * 64 + model.num_morphs * 4 + (model.num_vertices * 12 if vertices else 0)
    what = f"{model.num_bones:,} bones" + (f", {model.num_vertices:,} vertices" if vertices else "")
    check_frames_memory(spec, num_frames, per_frame, what, "pose")


@click.command("pose")
@click.argument("model_path", metavar="MODEL", type=click.Path(exists=True, dir_okay=False))
@click.argument("motion_path", metavar="[MOTION]", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option("--clip", default=None, metavar="NAME|INDEX", help=CLIP_HELP)
@click.option("--frames", default=FRAMES_DEFAULT, show_default=True, help=FRAMES_HELP)
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Output .npz file.")
@click.option("--physics/--no-physics", default=True, show_default=True, help=PHYSICS_HELP)
@click.option("--vertices", is_flag=True, help="Also write skinned vertex positions (F,V,3).")
@click.option("--compress/--no-compress", default=True, show_default=True,
              help="Deflate the arrays in the .npz (np.savez_compressed, about a quarter smaller with "
                   "--vertices); --no-compress writes faster.")
@click.option("--vpd", "vpd_specs", multiple=True, metavar="FILE.vpd@FRAME[:WEIGHT]", help=VPD_OPTION_HELP)
@click.option("--source", "source_path", default=None, metavar="SOURCE_MODEL", help=SOURCE_HELP)
@click.option("-q", "--quiet", is_flag=True, help=QUIET_HELP)
@click.option("-v", "--verbose", is_flag=True, help=VERBOSE_HELP)
def command(model_path, motion_path, clip, frames, output, physics, vertices, compress, vpd_specs, source_path, quiet,
            verbose):
    """Pose MODEL with MOTION (or a clip of its own) at each frame and write arrays to an .npz.

    \b
    Example:
      mmdkit pose Gene.pmx wavefile_v2.vmd --frames 0:300 -o pose.npz
      mmdkit pose Gene.pmx wavefile_v2.vmd --vpd hands.vpd@120:0.5 -o pose.npz
      mmdkit pose Fox.glb --clip Run -o fox.npz
      python -c "import numpy as np; d=np.load('pose.npz'); print(d['bone_world'].shape)"
    """
    from mmdkit.runtime.arrays import PoseArrays

    take = make_take(model_path, motion_path, clip=clip, vpd_specs=vpd_specs, frames=frames, physics=physics,
                     rest_pose=False, source=source_path)
    check_output(output, (model_path, motion_path, *(spec.rpartition("@")[0] for spec in vpd_specs)))
    if not output.lower().endswith(".npz"):
        raise OptionError("-o", f"{output}: pose writes NumPy arrays; name the output ….npz "
                                "(other formats: mmdkit export)")
    sink = PoseArrays(vertices)
    with compile_note(quiet):
        loaded = load(take, quiet=quiet, check=lambda t: _check_memory(frames, len(t.frames), t.model, vertices))
        model = loaded.model
        with out_of_memory_blames("--frames", f"posing '{frames}' ({len(loaded.frames):,} frames of {model_path}"
                                  + (" with --vertices)" if vertices else ")"), "pose fewer frames per run"):
            run(loaded, [sink], progress=show_progress(quiet) and len(loaded.frames) > 200)
    out = sink.result
    arrays = dict(frames=out["frames"], bone_names=np.array(model.bone_name), bone_world=out["bone_world"],
                  morph_names=np.array(model.morph_name), morph_weight=out["morph_weight"])
    if vertices:
        arrays["vertex_position"] = out["vertex_position"]
    with writing(output):
        save_npz_atomic(output, compress=compress, **arrays)
    if not quiet:
        click.echo(f"wrote {output}: {len(loaded.frames)} frames × {model.num_bones} bones"
                   + (f", {model.num_vertices} vertices" if vertices else ""))
