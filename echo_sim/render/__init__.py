"""Rendering to image files (matplotlib Agg, never a window): graphs and charts."""
