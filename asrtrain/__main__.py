"""``python -m asrtrain``. A Ctrl-C while the command's modules are still being imported is ours too."""

try:
    from asrtrain.cli import main
except KeyboardInterrupt:
    import os
    import sys

    sys.stderr.write("asrtrain: error: interrupted (SIGINT / Ctrl-C) (fix: run it again; asrtrain train "
                     "continues from the last checkpoint with --resume)\n")
    sys.stderr.flush()
    os._exit(1)

main()
