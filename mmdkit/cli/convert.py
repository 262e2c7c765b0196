"""``mmdkit convert IN OUT``: read IN, write OUT in the format its extension names.

In: two paths. Out: OUT written atomically (PMD → PMX carries bone flags, IK, physics and
toon textures; same format = rewrite). Models go to .pmx/.pmd, motions to .vmd, poses to .vpd.
"""

from __future__ import annotations

import click

from mmdkit.cli._output import check_output, writing


@click.command("convert")
@click.argument("src", type=click.Path(dir_okay=False))
@click.argument("dst", type=click.Path(dir_okay=False))
def command(src, dst):
    """Convert SRC to DST by extension (e.g. model.pmd → model.pmx)."""
    from mmdkit.formats.io import load, save

    check_output(dst, (src,), option="DST")
    obj = load(src)
    for w in obj.warnings:
        click.echo(f"mmdkit: warning: {src}: {w}", err=True)
    with writing(dst, option="DST"):
        save(obj, dst)
    click.echo(f"wrote {dst}")
