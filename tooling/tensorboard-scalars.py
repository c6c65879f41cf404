"""Prints, as JSON, the scalars that TensorBoard itself reads from a log folder.

    python3 tooling/tensorboard-scalars.py LOGDIR

Needs the `tensorboard` package (TensorFlow is not needed). Prints one object:

  "runs":   {run: {tag: [[step, value], ...]}}, read the way `tensorboard --logdir LOGDIR`
            reads it: its own flag defaults, data ingester and scalars data provider
            (simple_value scalars migrated to tensors, orphaned steps purged);
  "events": {file: [[step, tag, value], ...]}, every scalar of every event file under
            LOGDIR as TensorBoard's event file loader reads it (simple_value migrated to a
            scalar tensor), in file order, nothing purged;
  "file_versions": {file: [file_version, ...]}.

Files are named relative to LOGDIR; the run of the folder LOGDIR itself is ".".
"""

import json
import os
import sys


def scalars_as_served(logdir):
    from tensorboard import context, program
    from tensorboard.backend.event_processing import data_ingester
    from tensorboard.plugins.core import core_plugin
    from tensorboard.plugins.scalar import metadata as scalar_metadata

    # The core plugin defines --logdir and the loading flags; their defaults are `tensorboard`'s.
    tb = program.TensorBoard(plugins=[core_plugin.CorePluginLoader()])
    tb.configure(argv=[None, "--logdir", logdir, "--reload_interval", "0", "--reload_task", "blocking"])
    ingester = data_ingester.LocalDataIngester(tb.flags)
    ingester.start()
    provider = ingester.data_provider
    ctx = context.RequestContext()
    read = provider.read_scalars(ctx, experiment_id="", plugin_name=scalar_metadata.PLUGIN_NAME, downsample=1_000_000)
    return {run: {tag: [[d.step, d.value] for d in data] for tag, data in sorted(tags.items())} for run, tags in sorted(read.items())}


def events_as_loaded(logdir):
    from tensorboard.backend.event_processing import event_file_loader, io_wrapper
    from tensorboard.util import tensor_util

    events, versions = {}, {}
    for dirpath, _, names in sorted(os.walk(logdir)):
        for name in sorted(names):
            path = os.path.join(dirpath, name)
            if not io_wrapper.IsSummaryEventsFile(path):
                continue
            rel = os.path.relpath(path, logdir)
            events[rel], versions[rel] = [], []
            for event in event_file_loader.EventFileLoader(path).Load():
                if event.HasField("file_version"):
                    versions[rel].append(event.file_version)
                for v in event.summary.value:
                    value = tensor_util.make_ndarray(v.tensor).item() if v.HasField("tensor") else v.simple_value
                    events[rel].append([event.step, v.tag, value])
    return events, versions


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    logdir = sys.argv[1]
    if not os.path.isdir(logdir):
        sys.exit(f"no folder {logdir}")
    events, versions = events_as_loaded(logdir)
    json.dump({"runs": scalars_as_served(logdir), "events": events, "file_versions": versions}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
