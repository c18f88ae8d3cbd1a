"""`python -m moss.api`: make the generated files from host/api/declarations.lua."""

import sys

from .declare import main

sys.exit(main(sys.argv[1:]))
