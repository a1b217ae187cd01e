"""Small data sets shipped with slt; `README.md` here gives each one's source and licence."""
