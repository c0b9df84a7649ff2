"""Parser: turns uploaded files into a document structure (headings, blocks, tables) and hierarchical chunks."""
