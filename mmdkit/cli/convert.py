"""``mmdkit convert IN OUT``: read IN, write OUT in the format its extension names.

In: two paths. Out: OUT written atomically (PMD → PMX carries bone flags, IK, physics and
toon textures; same format = rewrite). Models go to .pmx/.pmd, motions to .vmd, poses to .vpd.
Says what a PMD cannot hold (warnings), and copies a model's textures beside OUT when OUT is in
another folder, so its relative texture paths stay valid.
"""

from __future__ import annotations

import click

from mmdkit.cli._common import compile_note, load_as, warn
from mmdkit.cli._output import check_output, writing


@click.command("convert")
@click.argument("src", type=click.Path(dir_okay=False))
@click.argument("dst", type=click.Path(dir_okay=False))
@click.option("-q", "--quiet", is_flag=True, help="No summary line (warnings and errors are still printed).")
def command(src, dst, quiet):
    """Convert SRC to DST by extension (e.g. model.pmd → model.pmx)."""
    from mmdkit.cli._convert import carry_textures, pmd_losses
    from mmdkit.formats.io import save
    from mmdkit.model.model import Model

    check_output(dst, (src,), option="DST")
    with compile_note(quiet):
        obj = load_as(src, object, "file", arg="SRC")
        with writing(dst, option="DST"):
            save(obj, dst)
            copied, notes = carry_textures(obj, src, dst) if isinstance(obj, Model) else (0, [])
    if isinstance(obj, Model) and dst.lower().endswith(".pmd") and obj.source_format != "pmd":
        for line in pmd_losses(obj):
            warn(f"{dst}: {line}")
    for line in notes:
        warn(f"{dst}: {line}")
    if not quiet:
        click.echo(f"wrote {dst}" + (f" (and copied {copied} texture files beside it)" if copied else ""))
