"""Annotated renders: ground truth for vision datasets from the renderer's own frame (docs/dataset.md).

``AnnotateSink`` (a sink of the frame loop: ``mmdkit render --annotate``, ``Output(folder,
{"annotate": True, ...})``) draws every view of every posed frame and writes RGB, depth, character
masks, body parts, COCO keypoints, calibrated cameras and 3D joints. Modules: ``cameras`` (K, R, t
⇄ GL matrices; ring, cameras.json and MMD camera views), ``parts`` (part of each vertex),
``keypoints`` (COCO-17 + humanoid joints and their rules), ``gpass`` (the GL label pass),
``dataset`` (the files), ``shards`` (WebDataset tars), ``preview`` (the contact sheet), ``sink``.
"""

from mmdkit.render.labels.sink import ANNOTATE_OPTIONS, AnnotateSink

__all__ = ["AnnotateSink", "ANNOTATE_OPTIONS"]
