"""`mmdkit render`: a model dancing to a motion → a video, one PNG, a folder of PNG frames — and, in
the same pass, any export file (-o repeats).

In: MODEL [MOTION] (or --demo) and the options every Take has (``cli._take``: camera, physics,
frames, fps, crowd, VPD poses) plus each output's own (size, MSAA, shadows, audio; joints, scale,
... for exports). Out: the files, each written atomically, a progress bar and a summary line each.
"""

from __future__ import annotations

import click

from mmdkit.cli._take import execute, output_options, take_options


@click.command("render")
@click.argument("model_path", metavar="MODEL", required=False, type=click.Path(exists=True, dir_okay=False))
@click.argument("motion_path", metavar="[MOTION]", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option("--demo", is_flag=True, help="Render the built-in demo character and dance (nothing downloaded).")
@take_options
@output_options
def command(demo, **params):
    """Render MODEL dancing to MOTION (a .vmd, or a .vpd pose; left out: a clip MODEL carries), headless
    (OpenGL through EGL; GPU or CPU). The folder -o writes into must exist. Several -o write several
    outputs from one pass (posed and simulated once): pictures, videos and export files alike.

    \b
    Examples:
      mmdkit render --demo -o demo.mp4
      mmdkit render Gene.pmx wavefile_v2.vmd --frames 0:300 -o gene.mp4
      mmdkit render Gene.pmx wavefile_v2.vmd --camera cam.vmd --size 1920x1080 -o out/
      mmdkit render Gene.pmx wavefile_v2.vmd -o dance.mp4 -o dance.glb -o dance.npz
      mmdkit render Fox.glb --clip Run -o fox.mp4
    """
    execute("render", params, demo=demo)
