"""Tile lowering over jaxprs: Tensor graph -> Tile graph -> Block graph (see DESIGN.md)."""
