package apps

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mcpswarm/mcpswarm/session"
)

// Elements shows the first 60 chemical elements in a table that sorts by
// any column and selects a row.
type Elements struct{}

// ElementsModel is Elements' state: the order and the selected symbol.
type ElementsModel struct {
	SortColumn    string `json:"sort_column"`
	SortDirection string `json:"sort_direction"`
	Selected      string `json:"selected"`
}

type element struct {
	Number int
	Symbol string
	Name   string
	Mass   float64
}

func elementData() []element {
	const data = `1 H Hydrogen 1.008;2 He Helium 4.0026;3 Li Lithium 6.94;4 Be Beryllium 9.0122;5 B Boron 10.81;
6 C Carbon 12.011;7 N Nitrogen 14.007;8 O Oxygen 15.999;9 F Fluorine 18.998;10 Ne Neon 20.18;
11 Na Sodium 22.99;12 Mg Magnesium 24.305;13 Al Aluminium 26.982;14 Si Silicon 28.085;15 P Phosphorus 30.974;
16 S Sulfur 32.06;17 Cl Chlorine 35.45;18 Ar Argon 39.948;19 K Potassium 39.098;20 Ca Calcium 40.078;
21 Sc Scandium 44.956;22 Ti Titanium 47.867;23 V Vanadium 50.942;24 Cr Chromium 51.996;25 Mn Manganese 54.938;
26 Fe Iron 55.845;27 Co Cobalt 58.933;28 Ni Nickel 58.693;29 Cu Copper 63.546;30 Zn Zinc 65.38;
31 Ga Gallium 69.723;32 Ge Germanium 72.63;33 As Arsenic 74.922;34 Se Selenium 78.971;35 Br Bromine 79.904;
36 Kr Krypton 83.798;37 Rb Rubidium 85.468;38 Sr Strontium 87.62;39 Y Yttrium 88.906;40 Zr Zirconium 91.224;
41 Nb Niobium 92.906;42 Mo Molybdenum 95.95;43 Tc Technetium 97;44 Ru Ruthenium 101.07;45 Rh Rhodium 102.91;
46 Pd Palladium 106.42;47 Ag Silver 107.87;48 Cd Cadmium 112.41;49 In Indium 114.82;50 Sn Tin 118.71;
51 Sb Antimony 121.76;52 Te Tellurium 127.6;53 I Iodine 126.9;54 Xe Xenon 131.29;55 Cs Caesium 132.91;
56 Ba Barium 137.33;57 La Lanthanum 138.91;58 Ce Cerium 140.12;59 Pr Praseodymium 140.91;60 Nd Neodymium 144.24`
	var out []element
	for _, rec := range strings.Split(data, ";") {
		f := strings.Fields(rec)
		n, _ := strconv.Atoi(f[0])
		mass, _ := strconv.ParseFloat(f[3], 64)
		out = append(out, element{Number: n, Symbol: f[1], Name: f[2], Mass: mass})
	}
	return out
}

func elementColumns() []session.TableColumn {
	return []session.TableColumn{
		{Key: "number", Title: "No.", Sortable: true},
		{Key: "symbol", Title: "Symbol", Sortable: true},
		{Key: "name", Title: "Name", Sortable: true},
		{Key: "mass", Title: "Mass (u)", Sortable: true},
	}
}

// Init implements session.App.
func (Elements) Init() (session.Model, error) {
	return ElementsModel{SortColumn: "number", SortDirection: "asc"}, nil
}

// Update implements session.App.
func (Elements) Update(m session.Model, msg session.Msg) (session.Model, error) {
	e, err := modelAs[ElementsModel](m)
	if err != nil {
		return nil, err
	}
	switch msg := msg.(type) {
	case session.Sort:
		e.SortColumn, e.SortDirection = msg.Column, msg.Direction
	case session.SelectRow:
		e.Selected = msg.Key
	case session.KeyPress:
		if msg.Key.Key == "escape" {
			e.Selected = ""
		}
	default:
		return nil, fmt.Errorf("table does not handle %T", msg)
	}
	return e, nil
}

func (e ElementsModel) sorted() []element {
	els := elementData()
	slices.SortStableFunc(els, func(a, b element) int {
		var c int
		switch e.SortColumn {
		case "symbol":
			c = cmp.Compare(a.Symbol, b.Symbol)
		case "name":
			c = cmp.Compare(a.Name, b.Name)
		case "mass":
			c = cmp.Compare(a.Mass, b.Mass)
		default:
			c = cmp.Compare(a.Number, b.Number)
		}
		if e.SortDirection == "desc" {
			return -c
		}
		return c
	})
	return els
}

// View implements session.App.
func (Elements) View(m session.Model) session.Node {
	e, _ := modelAs[ElementsModel](m)
	els := e.sorted()
	rows := make([]session.TableRow, len(els))
	detail := "No element selected."
	for i, el := range els {
		rows[i] = session.TableRow{Key: el.Symbol, Cells: []string{
			strconv.Itoa(el.Number), el.Symbol, el.Name, strconv.FormatFloat(el.Mass, 'f', -1, 64)}}
		if el.Symbol == e.Selected {
			detail = fmt.Sprintf("%s (%s): atomic number %d, mass %s u", el.Name, el.Symbol, el.Number, rows[i].Cells[3])
		}
	}
	return session.Column{Items: []session.Node{
		session.Text{ID: "title", Text: "Chemical elements 1-60"},
		session.Text{ID: "detail", Text: detail},
		session.Table{ID: "elements", Columns: elementColumns(), Rows: rows, Selected: e.Selected,
			SortColumn: e.SortColumn, SortDirection: e.SortDirection},
	}}
}

// Resources implements session.ResourceProvider.
func (Elements) Resources() []session.Projection {
	return []session.Projection{{Key: "selection", Description: "The sort order and the selected element.", Project: func(m session.Model) any {
		e, _ := modelAs[ElementsModel](m)
		return e
	}}}
}
