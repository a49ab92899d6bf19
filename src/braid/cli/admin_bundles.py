"""``braid admin`` commands for namespace bundles and unloading, with pulsar-admin's names:

* ``braid admin namespaces bundles | unload | split-bundle`` (list the hash ranges; move a
  namespace's or one bundle's topics to other brokers; cut a bundle in two);
* ``braid admin topics unload`` (close a topic on its broker; its clients reconnect).

:mod:`braid.cli.admin` builds the parser and calls the ``add_*`` functions here with the helpers
of :mod:`braid.cli.admin_parser`, so these commands read and fail like every other one.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING

from braid.cli.admin_commands import Handler, Printer, _persistent_name

if TYPE_CHECKING:
    from braid.admin.client import AdminClient

    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]
    CommandAdder = Callable[..., argparse.ArgumentParser]
    ArgAdder = Callable[..., None]

_BUNDLES_HELP = """\
A namespace's topics are split into bundles by the CRC-32 hash of their names; each bundle is
a range 0xLOWER_0xUPPER of that hash and is served by exactly one broker. Bundles are the unit
the load manager moves between brokers and splits when they get hot (docs/deploy.md)."""


def ns_bundles(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    data = admin.namespaces.bundles(args.namespace)
    if p.json:
        p.data(data)
        return
    bounds = data.get("boundaries") or []
    p.line(f"{args.namespace}: {data.get('numBundles')} bundles")
    for lower, upper in itertools.pairwise(bounds):
        p.line(f"  {lower}_{upper}")


def ns_unload(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    admin.namespaces.unload(args.namespace, args.bundle, args.destination_broker)
    what = f"bundle {args.bundle} of {args.namespace}" if args.bundle else args.namespace
    p.done(f"Unloaded {what}: its clients moved to other brokers.")


def ns_split_bundle(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    admin.namespaces.split_bundle(args.namespace, args.bundle, unload=args.unload)
    p.done(f"Split bundle {args.bundle} of {args.namespace} in two.")


def topics_unload(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    name = _persistent_name(args.topic)
    admin.topics.unload(name)
    p.done(f"Unloaded {name}: its clients reconnect and it is loaded again.")


def add_namespace_bundle_commands(
    commands: SubParsers, command: CommandAdder, namespace_arg: ArgAdder
) -> None:
    """Add ``bundles``, ``unload`` and ``split-bundle`` to ``braid admin namespaces``."""
    p = command(
        commands,
        "bundles",
        ns_bundles,
        "list the namespace's bundles (hash ranges of topic names, each served by one broker)",
        description=_BUNDLES_HELP,
        examples="  braid admin namespaces bundles public/default\n",
    )
    namespace_arg(p)
    p = command(
        commands,
        "unload",
        ns_unload,
        "move a namespace's bundles (or one bundle) to other brokers, clients following",
        description=_BUNDLES_HELP
        + "\n\nUnloading a bundle: its broker stops serving it, closes its producers and\n"
        "consumers telling them the new broker (the least loaded other one, or\n"
        "--destination-broker), and gives the bundle up. Clients reconnect there by\n"
        "themselves; no acknowledged message is lost. The call may go to any broker.",
        examples=(
            "  braid admin namespaces unload public/default\n"
            "  braid admin namespaces unload public/default --bundle 0x40000000_0x50000000\n"
            "  braid admin namespaces unload public/default --bundle 0x40000000_0x50000000 \\\n"
            "      --destination-broker broker2:6650\n"
        ),
    )
    namespace_arg(p)
    p.add_argument("--bundle", "-b", metavar="0xLO_0xHI", help="only this bundle")
    p.add_argument(
        "--destination-broker",
        "-d",
        metavar="HOST:PORT",
        help="the broker to move the bundle to (as `braid admin brokers list` names it)",
    )
    p = command(
        commands,
        "split-bundle",
        ns_split_bundle,
        "cut a bundle in two at the middle of its hash range",
        description=_BUNDLES_HELP
        + "\n\nSplitting lets the two halves' topics be served by different brokers. The\n"
        "bundle's broker takes both halves, then records the new boundaries in the namespace\n"
        "policies (refused if they changed meanwhile), then gives the old bundle up: no range\n"
        "ever has two brokers. With --unload the halves move to other brokers at once.",
        examples=(
            "  braid admin namespaces bundles public/default\n"
            "  braid admin namespaces split-bundle public/default --bundle 0x40000000_0x50000000\n"
        ),
    )
    namespace_arg(p)
    p.add_argument("--bundle", "-b", required=True, metavar="0xLO_0xHI", help="the bundle")
    p.add_argument(
        "--unload", "-u", action="store_true", help="unload the two halves after the split"
    )


def add_topic_unload_command(
    commands: SubParsers, command: CommandAdder, topic_arg: ArgAdder
) -> None:
    """Add ``unload`` to ``braid admin topics``."""
    p = command(
        commands,
        "unload",
        topics_unload,
        "close a topic on its broker: its clients reconnect and the topic is loaded again",
        description="Close a topic on its broker: its clients reconnect and it is loaded again.\n"
        "The topic stays on the broker that owns its bundle; to move it, unload its bundle\n"
        "(`braid admin namespaces unload NS --bundle 0xLO_0xHI`).",
        examples="  braid admin topics unload persistent://public/default/events\n",
    )
    topic_arg(p, "persistent topic")


HANDLERS: tuple[Handler, ...] = (ns_bundles, ns_unload, ns_split_bundle, topics_unload)

__all__ = ["HANDLERS", "add_namespace_bundle_commands", "add_topic_unload_command"]
