"""Bounds shared by the media layer and the commands that set them (no heavy imports here)."""

DEFAULT_MAX_PIXELS = 7680 * 4320  # 8K UHD: what one decoded frame may cost (about 100 MB as RGB)
