"""The reply words of the DMAs -insert-dma writes: each group of transfers
counts its completions on its own word, so a wait never takes another's.
"""

from __future__ import annotations


GET_REPLY, PUT_REPLY, EDGE_REPLY = 0, 1, 2
EVEN_REPLY, ODD_REPLY = 3, 4     # double buffering: the two halves of a tile pair
BCAST_REPLY = 5                  # broadcasts: CPE 0 waits for each alone
MESH_REPLY = 6                   # -mesh-broadcast: each CPE's share of a relayed tile
