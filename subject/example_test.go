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
