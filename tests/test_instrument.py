

def test_steps_tile_the_timeline_but_checkpoints_are_not_training_time(tel):
    with tel.step():
        pass
    time.sleep(0.05)  # data loading between steps belongs to the next step
    with tel.step():
        pass
    with tel.checkpoint():
        time.sleep(0.2)
    with tel.step():
        pass
    s = scrape(tel)
    assert 0.05 <= value(s, "train_step_seconds_sum") < 0.15
    assert value(s, "train_step_seconds_count") == 3
