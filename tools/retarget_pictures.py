"""The side-by-side picture in docs/retarget.md: Gene_light dancing wavefile_v2 (top row) and the
same dance retargeted from Gene onto mokou_A, Godette (VRM 0.x) and debug_robot (VRM 1.0), at
motion frames 1570, 1600, 1630, physics off. Usage: python3 tools/retarget_pictures.py OUT.png
"""
import sys

import numpy as np, mmdkit
from PIL import Image
from mmdkit.render.pipeline import render_motion
from mmdkit.runtime.take import Take
from pathlib import Path
A = str(Path(__file__).resolve().parents[2] / 'shared' / 'assets')
dance=mmdkit.load(f'{A}/wavefile/wavefile_v2.vmd')
src=mmdkit.load(f'{A}/gene/Gene_light.pmx')
frames=[1570.0, 1600.0, 1630.0]
rows=[]
for path in [f'{A}/gene/Gene_light.pmx', f'{A}/mokou/mokou_A.pmd', f'{A}/rigs/vrm0/Godette_vrm_v4.vrm', f'{A}/rigs/vrm1/debug_robot.vrm']:
    t = Take(path, f'{A}/wavefile/wavefile_v2.vmd', source=f'{A}/gene/Gene_light.pmx', frames=frames, physics=False)
    loaded = t.load()
    imgs=[]
    for f in frames:
        out=f'{sys.argv[1]}.{len(rows)}_{int(f)}.png'
        render_motion(loaded.model, loaded.motion, out, frames=[f], size=(240,300), physics=False, progress=False, warn=lambda m: None)
        imgs.append(Image.open(out).convert('RGB'))
    rows.append(np.concatenate([np.asarray(i) for i in imgs],1))
Image.fromarray(np.concatenate(rows,0)).save(sys.argv[1])
