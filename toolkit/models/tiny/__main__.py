import sys

from toolkit.models.tiny import main

sys.exit(main())
