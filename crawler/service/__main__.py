"""``python -m crawler.service``: the service without the ``crawler`` command."""

import sys

from crawler.service.command import main

sys.exit(main())
