"""mmdkit.skinning"""
