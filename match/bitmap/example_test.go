package bitmap_test

import (
	"fmt"
	"slices"

	"github.com/skiffmq/skiff/match"
	"github.com/skiffmq/skiff/match/bitmap"
)

func Example() {
	m, err := bitmap.New[string](bitmap.Options{
		Topics: []string{"forex.usd", "forex.eur", "stock.nasdaq", "stock.nyse"},
	})
	if err != nil {
		panic(err)
	}
	_ = m.Subscribe("forex.*", "", "fx-desk")
	_ = m.Subscribe("stock.nyse", "", "nyse-feed")
	_ = m.Subscribe("*.*", "audit", "auditor-1")
	_ = m.Subscribe("stock.*", "", "equities")

	var r match.Result[string]
	for _, subj := range []string{"stock.nyse", "forex.eur", "forex.jpy"} {
		if err := m.Lookup(subj, &r); err != nil {
			panic(err)
		}
		slices.Sort(r.Plain)
		fmt.Println(subj, r.Plain, r.Groups)
	}
	// Output:
	// stock.nyse [equities nyse-feed] [{audit [auditor-1]}]
	// forex.eur [fx-desk] [{audit [auditor-1]}]
	// forex.jpy [fx-desk] [{audit [auditor-1]}]
}
