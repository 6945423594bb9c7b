from tests.builders import make_customer


def test_get_customer_round_trip(vapi):
    customer = make_customer(vapi)
    response = vapi.get(f"/customers/{customer.id}")
    assert response.status_code == 200, response.text
    assert response.json()["customer"]["id"] == customer.id
