"""``mmdkit convert IN OUT``: read IN, write OUT in the format its extension names.

In: two paths. Out: OUT written atomically (PMD → PMX carries bone flags, IK, physics and
toon textures; same format = rewrite). Models go to .pmx/.pmd, motions to .vmd, poses to .vpd.
"""

from __future__ import annotations

import click

from mmdkit.cli._common import compile_note
from mmdkit.cli._output import check_output, writing


@click.command("convert")
@click.argument("src", type=click.Path(dir_okay=False))
@click.argument("dst", type=click.Path(dir_okay=False))
@click.option("-q", "--quiet", is_flag=True, help="No summary line (warnings and errors are still printed).")
def command(src, dst, quiet):
    """Convert SRC to DST by extension (e.g. model.pmd → model.pmx)."""
    from mmdkit.formats.io import load, save

    check_output(dst, (src,), option="DST")
    with compile_note(quiet):
        obj = load(src)
        for w in obj.warnings:
            click.echo(f"mmdkit: warning: {src}: {w}", err=True)
        with writing(dst, option="DST"):
            save(obj, dst)
    if not quiet:
        click.echo(f"wrote {dst}")
