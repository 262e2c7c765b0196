"""A contact sheet of one annotated frame, so a person can check the labels by eye.

In: per view the frame's pictures as written — rgb (H,W,3) uint8, parts (H,W) uint8, mask (H,W)
uint8/uint16, depth (H,W) uint16 mm — and its keypoints: pixels (N,J,2) float64 and visibility (N,J)
uint8, with the skeleton (1-based pairs). Out: ``contact_sheet`` → (4H, C·W, 3) uint8: one column per
view; rows: the picture with the COCO-17 keypoints (green: seen, red: hidden), their skeleton and
each character's box; the body parts in ``PART_COLORS``; the characters in ``CHARACTER_COLORS``;
the depth shaded (near = bright, background black).
"""

from __future__ import annotations

import numpy as np

PART_COLORS = np.array([[0, 0, 0], [240, 200, 160], [70, 110, 200], [220, 60, 60], [60, 180, 60], [250, 130, 130],
                        [130, 220, 130], [180, 30, 30], [30, 120, 30], [230, 180, 40], [40, 200, 200],
                        [250, 220, 120], [120, 230, 230], [150, 90, 20], [20, 100, 120], [120, 60, 160],
                        [230, 100, 230], [128, 128, 128]] + [[255, 255, 255]] * 238, np.uint8)
"""RGB per part id (``parts.PART_NAMES``), white past the table."""
CHARACTER_COLORS = np.array([[0, 0, 0], [255, 90, 170], [90, 200, 255], [255, 200, 60], [120, 230, 120],
                             [200, 140, 255], [255, 140, 90]], np.uint8)
"""RGB per character id (repeating after the sixth)."""
COCO_LINKS = 19
"""The first links of the skeleton are COCO-17's."""


def _shaded(depth: np.ndarray) -> np.ndarray:
    fg = depth > 0
    out = np.zeros(depth.shape + (3,), np.uint8)
    if fg.any():
        d = depth[fg].astype(np.float64)
        out[fg] = (255 - (d - d.min()) / (np.ptp(d) + 1.0) * 205).astype(np.uint8)[:, None]
    return out


def _annotated(rgb, mask, uv, vis, skeleton) -> np.ndarray:
    from PIL import Image, ImageDraw

    img = Image.fromarray(rgb)
    draw = ImageDraw.Draw(img)
    for n in range(len(uv)):
        ys, xs = np.nonzero(mask == n + 1)
        if not len(xs):
            continue
        draw.rectangle([int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max())], outline=(0, 0, 255))
        for a, b in skeleton[:COCO_LINKS]:
            if vis[n, a - 1] and vis[n, b - 1]:
                draw.line([tuple(uv[n, a - 1]), tuple(uv[n, b - 1])], fill=(255, 160, 0), width=1)
        for (x, y), v in zip(uv[n, :17], vis[n, :17]):
            if v:
                draw.ellipse([x - 2, y - 2, x + 2, y + 2], fill=(0, 200, 0) if v == 2 else (255, 0, 0))
    return np.asarray(img)


def contact_sheet(views: list, skeleton) -> np.ndarray:
    """``views``: per view (rgb, parts, mask, depth, uv, vis) as the module docstring says."""
    columns = []
    for rgb, parts, mask, depth, uv, vis in views:
        characters = CHARACTER_COLORS[np.where(mask > 0, (mask.astype(np.int64) - 1) % 6 + 1, 0)]
        columns.append(np.concatenate([_annotated(rgb, mask, uv, vis, skeleton), PART_COLORS[parts], characters,
                                       _shaded(depth)], 0))
    return np.concatenate(columns, 1)
