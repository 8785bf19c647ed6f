package posbitmap_test

import (
	"fmt"
	"slices"

	"github.com/skiffmq/skiff/match"
	"github.com/skiffmq/skiff/match/posbitmap"
)

func Example() {
	m, err := posbitmap.New[string](posbitmap.Options{MaxTokens: 2})
	if err != nil {
		panic(err)
	}
	_ = m.Subscribe("forex.*", "", "fx-desk")
	_ = m.Subscribe("stock.nyse", "", "nyse-feed")
	_ = m.Subscribe("index", "", "index-feed")
	_ = m.Subscribe("stock.*", "", "equities")
	_ = m.Subscribe("stock.>", "", "archive")   // also matches past MaxTokens
	_ = m.Subscribe("#.ibm", "", "ibm-watcher") // "#" before the end: fallback list

	var r match.Result[string]
	for _, subj := range []string{"stock.nyse", "index", "stock.nyse.ibm"} {
		if err := m.Lookup(subj, &r); err != nil {
			panic(err)
		}
		slices.Sort(r.Plain)
		fmt.Println(subj, r.Plain)
	}
	// Output:
	// stock.nyse [archive equities nyse-feed]
	// index [index-feed]
	// stock.nyse.ibm [archive ibm-watcher]
}
