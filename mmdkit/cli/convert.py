"""``mmdkit convert IN OUT``: read IN, write OUT in the format its extension names.

In: two paths. Out: OUT written atomically (PMD → PMX carries bone flags, IK, physics and
toon textures; same format = rewrite). Models go to .pmx/.pmd, motions to .vmd, poses to .vpd.
Says what a PMD cannot hold (warnings), and copies a model's textures beside OUT when OUT is in
another folder, so its relative texture paths stay valid.
"""

from __future__ import annotations

import click

from mmdkit.cli._common import compile_note, load_as, warn
from mmdkit.cli._output import check_output, count, writing
from mmdkit.errors import OptionError


def _clip(obj, src: str, clip: str):
    """The Motion of clip ``clip`` of the imported model ``obj`` (OptionError('--clip') otherwise)."""
    from mmdkit.importers import clips_of
    from mmdkit.model.model import Model

    clips = clips_of(obj) if isinstance(obj, Model) else None
    if not clips:
        raise OptionError("--clip", f"{src} carries no clips (a .glb/.gltf with animations has)")
    return clips.get_clip(clip, "--clip")[1]


@click.command("convert")
@click.argument("src", type=click.Path(dir_okay=False))
@click.argument("dst", type=click.Path(dir_okay=False))
@click.option("--clip", default=None, metavar="NAME|INDEX",
              help="Write this clip of SRC (a .glb/.gltf) as the motion DST (.vmd) instead of the model.")
@click.option("-q", "--quiet", is_flag=True, help="No summary line and no warnings (errors are still printed).")
def command(src, dst, clip, quiet):
    """Convert SRC to DST by extension (e.g. model.pmd → model.pmx, Fox.glb → Fox.pmx;
    Fox.glb → run.vmd --clip Run)."""
    from mmdkit.cli._convert import carry_textures, import_losses, pmd_losses
    from mmdkit.formats.io import save
    from mmdkit.model.model import Model

    check_output(dst, (src,), option="DST")
    with compile_note(quiet):
        obj = load_as(src, object, "file", arg="SRC")
        if clip is not None:
            obj = _clip(obj, src, clip)
        with writing(dst, option="DST"):
            save(obj, dst)
            copied, notes = carry_textures(obj, src, dst) if isinstance(obj, Model) else (0, [])
    if isinstance(obj, Model) and dst.lower().endswith(".pmd") and obj.source_format != "pmd":
        for line in pmd_losses(obj):
            warn(f"{dst}: {line}")
    if isinstance(obj, Model) and "import_losses" in obj.source_extras:
        for line in import_losses(obj):
            warn(f"{dst}: {line}")
    for line in notes:
        warn(f"{dst}: {line}")
    if not quiet:
        click.echo(f"wrote {dst}" + (f" (and copied {count(copied, 'texture file')} beside it)" if copied else ""))
