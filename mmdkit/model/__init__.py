"""mmdkit.model"""
