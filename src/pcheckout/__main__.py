from pcheckout.cli import entrypoint

entrypoint()
