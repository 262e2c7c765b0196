"""`mmdkit export MODEL [MOTION] -o OUT.{glb,gltf,bvh,vmd,npz}`: the motion baked through the full pipeline.

In: a model, optionally a motion (VMD, VPD pose, or a clip of the model), a camera VMD and the
options every Take has (``cli._take``), plus each output's own. Out: the files
``mmdkit.export.ExportSink`` writes for each output's extension (see docs/export.md; pictures and
videos too, as ``render`` writes them), one summary line each, all from one pass.
"""

from __future__ import annotations

import click

from mmdkit.cli._take import execute, output_options, take_options


@click.command("export")
@click.argument("model_path", metavar="MODEL", type=click.Path(exists=True, dir_okay=False))
@click.argument("motion_path", metavar="[MOTION]", required=False, type=click.Path(exists=True, dir_okay=False))
@take_options
@output_options
def command(**params):
    """Bake MOTION on MODEL (IK, append, morphs, physics) and write it by each -o's extension; several
    -o write several files from one pass.

    \b
    Examples:
      mmdkit export Gene.pmx wavefile_v2.vmd -o dance.glb
      mmdkit export Gene.pmx wavefile_v2.vmd -o dance.bvh --joints humanoid --scale 0.08
      mmdkit export Gene.pmx wavefile_v2.vmd -o baked.vmd --reduce 0.001
      mmdkit export Gene.pmx wavefile_v2.vmd -o baked.vmd --reduce 0.001 --reduce-physics 0.05
      mmdkit export Gene.pmx wavefile_v2.vmd -o data.npz --joints humanoid --fps 60
      mmdkit export Gene.pmx wavefile_v2.vmd -o dance.vrma
      mmdkit export Gene.pmx wavefile_v2.vmd -o dance.glb -o data.npz -o dance.mp4
    """
    execute("export", params)
