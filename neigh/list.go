package neigh

// The table's intrusive lists of entries, one code for both:
//   - gcList: every non-permanent entry, in the order it joined
//     (neigh_update_gc_list), walked by the periodic and the forced gc;
//   - pendList: the entries holding queued packets, in the order their queues
//     became non-empty; the global queue budget drops from its head.
//
// Each entry carries one link per list, so joining or leaving one is O(1)
// and allocates nothing. Locking: the table's mutex.

// listID names one of the table's lists.
type listID uint8

const (
	gcList listID = iota
	pendList
	numLists
)

// listLink is an entry's place in one list.
type listLink struct {
	prev, next *entry
	on         bool
}

// entryList is a list's ends.
type entryList struct {
	head, tail *entry
}

// listPushLocked appends n, which is on no list id, to list id.
func (t *Table) listPushLocked(id listID, n *entry) {
	l, k := &t.lists[id], &n.links[id]
	k.on = true
	k.prev, k.next = l.tail, nil
	if l.tail != nil {
		l.tail.links[id].next = n
	} else {
		l.head = n
	}
	l.tail = n
}

// listUnlinkLocked takes n off list id; it reports whether n was on it.
func (t *Table) listUnlinkLocked(id listID, n *entry) bool {
	l, k := &t.lists[id], &n.links[id]
	if !k.on {
		return false
	}
	if k.prev != nil {
		k.prev.links[id].next = k.next
	} else {
		l.head = k.next
	}
	if k.next != nil {
		k.next.links[id].prev = k.prev
	} else {
		l.tail = k.prev
	}
	*k = listLink{}
	return true
}
