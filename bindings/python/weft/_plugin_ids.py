"""Extension ids (weft/plugin.h): the ints a loaded plugin or a created operator adds to weft's
enums (operators, wire formats, schedule kinds, router selectors, cost models), all from
WEFT_PLUGIN_ID_BASE = 64 up. Kept apart from _plugin.py so the family modules (_moe, _pipeline,
_training, _comm) can accept them without importing the loader."""

from ._errors import InvalidArgument
from ._lib import PLUGIN_ID_BASE


def is_extension(value):
    """Whether value is an extension id (an int >= WEFT_PLUGIN_ID_BASE, not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= PLUGIN_ID_BASE


def names_extension(value):
    """Whether value is meant as an extension: an id >= 64, or an object with an `.id` (a plugin
    entry, a UserOp), which extension_id() then accepts or refuses with a message."""
    return is_extension(value) or (not isinstance(value, int) and hasattr(value, "id"))


def extension_id(value, what, builtin=0):
    """The int to put in a config field that takes `builtin` (the built-in choice, usually 0) or
    an extension id: value may be None or builtin, an int >= 64, or anything with an int `.id`
    (a weft.PluginEntry of a loaded plugin, a weft.UserOp)."""
    if value is None:
        return builtin
    ident = getattr(value, "id", value)
    if isinstance(ident, int) and not isinstance(ident, bool) and (ident == builtin or ident >= PLUGIN_ID_BASE):
        return int(ident)
    if hasattr(value, "id"):
        raise InvalidArgument("%s=%r: its id %r is not a registered extension (an entry of kind FUNCTION has none)"
                              % (what, value, ident))
    raise InvalidArgument("%s=%r: expected %d (built in), a plugin entry or an extension id >= %d"
                          % (what, value, builtin, PLUGIN_ID_BASE))
