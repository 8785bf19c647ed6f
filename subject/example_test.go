package subject_test

import (
	"errors"
	"fmt"

	"github.com/skiffmq/skiff/subject"
)

func ExampleMatch() {
	fmt.Println(subject.Match("*.stock.#", "usd.stock"))
	fmt.Println(subject.Match("*.stock.#", "eur.stock.db"))
	fmt.Println(subject.Match("*.stock.#", "stock.nasdaq"))
	fmt.Println(subject.Match("orders.>", "orders"))
	// Output:
	// true
	// true
	// false
	// false
}

func ExampleSplitPattern() {
	var buf [32]string
	toks, err := subject.SplitPattern(buf[:0], "orders.*.>")
	fmt.Println(toks, err)
	_, err = subject.SplitPattern(buf[:0], "orders.>.eu")
	fmt.Println(errors.Is(err, subject.ErrRestNotLast))
	// Output:
	// [orders * >] <nil>
	// true
}

func ExampleTransform() {
	tr, err := subject.NewTransform("orders.*.*", "shop.$2.{{wildcard(1)}}")
	if err != nil {
		panic(err)
	}
	fmt.Println(tr.Map("orders.eu.new"))
	fmt.Println(tr.Map("invoices.eu.new"))
	_, err = subject.NewTransform("orders.*", "shop.{{partition(3,1)}}")
	fmt.Println(errors.Is(err, subject.ErrUnsupported))
	// Output:
	// shop.new.eu true
	//  false
	// true
}
