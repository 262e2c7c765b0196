"""mmdkit.formats"""
